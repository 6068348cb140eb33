// kafkajs consumers in one classic group, as a ledger (run by tests/e2e/test_group_once_kafkajs.py):
//   node group_once.js '{"brokers": "host:port,...", "topic": "t", "group": "g", "members": 3}'
// Each member takes a batch (eachBatch), processes its records, then commits the next offset
// (manual commit) and goes on. The script prints one JSON line per event, in the one order
// they happen (the members share this one Node thread):
//   {"m": i, "assigned": [[partitions of member 1], ...]}
//                                      member i's GROUP_JOIN (null: not joined, or left)
//   {"m": i, "processed": [[partition, offset], ...]}   a batch member i processed
//   {"committed": [[partition, next offset]]}        its commit acknowledged
//   {"commitFailed": "..."}                          its commit refused (not committed)
//   {"left": i}, {"stopped": true}
// Commands on stdin, one a line: "leave" (the first member still in disconnects: LeaveGroup),
// "stop" (all disconnect, then the script exits).
const readline = require('readline')
const { Kafka, logLevel } = require('kafkajs')

const args = JSON.parse(process.argv[2])
const kafka = new Kafka({
  clientId: 'kmeta-e2e-group-once',
  brokers: args.brokers.split(','),
  logLevel: logLevel.NOTHING,
  // (one retry: a commit kafkajs cannot make fails in well under a second, not ~15 s)
  retry: { retries: 1, initialRetryTime: 100, maxRetryTime: 300 },
})

const emit = event => process.stdout.write(JSON.stringify(event) + '\n')
const assigned = []
const members = []

async function join(i) {
  const consumer = kafka.consumer({
    groupId: args.group, sessionTimeout: 10000, heartbeatInterval: 300, rebalanceTimeout: 10000,
    metadataMaxAge: 1000, // (the added partitions soon)
  })
  assigned.push(null)
  consumer.on(consumer.events.GROUP_JOIN, e => {
    assigned[i] = (e.payload.memberAssignment[args.topic] || []).slice().sort((a, b) => a - b)
    emit({ m: i, assigned })
  })
  await consumer.connect()
  await consumer.subscribe({ topic: args.topic, fromBeginning: true })
  await consumer.run({
    autoCommit: false,
    eachBatch: async ({ batch, heartbeat, resolveOffset }) => {
      if (batch.messages.length === 0) return
      const partition = batch.partition
      emit({ m: i, processed: batch.messages.map(m => [partition, Number(m.offset)]) })
      const last = batch.messages[batch.messages.length - 1].offset
      // (processed: the member's position moves past the batch now. kafkajs moves it only when
      // eachBatch returns, so a heartbeat that throws below, the coordinator's broker just
      // killed, would fetch the whole batch again behind the commit it just made)
      resolveOffset(last)
      const next = Number(last) + 1
      try {
        await consumer.commitOffsets([{ topic: args.topic, partition, offset: String(next) }])
      } catch (err) {
        emit({ commitFailed: `${err.name}: ${err.message}` })
        return
      }
      emit({ committed: [[partition, next]] })
      await heartbeat()
    },
  })
  members.push(consumer)
}

async function main() {
  for (let i = 0; i < args.members; i++) await join(i)
  let left = 0
  for await (const line of readline.createInterface({ input: process.stdin })) {
    if (line === 'leave') {
      await members[left].disconnect()
      assigned[left] = null
      emit({ left })
      left += 1
    } else if (line === 'stop') {
      for (const consumer of members.slice(left)) await consumer.disconnect()
      emit({ stopped: true })
      return
    }
  }
}

main().then(() => process.exit(0), err => { console.error(err.stack || String(err)); process.exit(1) })
