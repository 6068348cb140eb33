// kafkajs consumers in one classic group against a kmeta cluster (run by
// tests/e2e/test_classic_groups.py):
//   node group.js '{"brokers": "host:port,...", "topic": "t", "group": "g", "members": 2}'
// starts the members, waits until their latest assignments (kafkajs' GROUP_JOIN events, sent
// once JoinGroup and SyncGroup are done) split every partition of the topic between them,
// prints {"assignments": [[partitions of member 1], ...], "joins": n} and disconnects.
const { Kafka, logLevel } = require('kafkajs')

const args = JSON.parse(process.argv[2])
const kafka = new Kafka({
  clientId: 'kmeta-e2e-group',
  brokers: args.brokers.split(','),
  logLevel: logLevel.NOTHING,
  retry: { retries: 20, initialRetryTime: 100 },
})

async function main() {
  const admin = kafka.admin()
  await admin.connect()
  const meta = await admin.fetchTopicMetadata({ topics: [args.topic] })
  const partitions = meta.topics[0].partitions.length
  await admin.disconnect()

  const latest = []
  let joins = 0
  const consumers = []
  for (let i = 0; i < args.members; i++) {
    const consumer = kafka.consumer({ groupId: args.group, sessionTimeout: 10000, heartbeatInterval: 500, rebalanceTimeout: 10000 })
    latest.push(null)
    consumer.on(consumer.events.GROUP_JOIN, e => {
      joins += 1
      latest[i] = (e.payload.memberAssignment[args.topic] || []).slice().sort((a, b) => a - b)
    })
    await consumer.connect()
    await consumer.subscribe({ topic: args.topic, fromBeginning: true })
    await consumer.run({ autoCommit: false, eachMessage: async () => {} })
    consumers.push(consumer)
  }
  const deadline = Date.now() + 60000
  for (;;) {
    const all = latest.filter(a => a !== null).flat().sort((a, b) => a - b)
    const split = latest.every(a => a !== null && a.length > 0) && all.length === partitions &&
      all.every((p, k) => p === k)
    if (split) break
    if (Date.now() > deadline) throw new Error('no split assignment: ' + JSON.stringify(latest))
    await new Promise(resolve => setTimeout(resolve, 100))
  }
  console.log(JSON.stringify({ assignments: latest, joins }))
  for (const consumer of consumers) await consumer.disconnect()
}

main().then(() => process.exit(0), err => { console.error(err.stack || String(err)); process.exit(1) })
