// kafkajs against a kmeta cluster (run by tests/e2e/test_real_clients_external.py):
//   node round_trip.js '{"brokers": "host:port,...", "topic": "t", "count": 10000,
//                        "partitions": 3, "t0": <ms>, "byTime": <ms>}'
// produces record i (value String(i), partition i % partitions, create time t0 + i), lists
// the offsets (earliest, latest, by time), fetches every record from each listed start, and
// prints one JSON object: the listed offsets, the records read per start, each phase's seconds.
//
// kafkajs' Consumer always joins a consumer group, which kmeta does not serve yet: records are
// read through kafkajs' own Fetch request and decoder (its cluster's broker.fetch, what the
// Consumer's fetch loop calls), the partitions "assigned" here by hand.
const { Kafka, logLevel, Partitioners } = require('kafkajs')

const args = JSON.parse(process.argv[2])
const kafka = new Kafka({
  clientId: 'kmeta-e2e',
  brokers: args.brokers.split(','),
  logLevel: logLevel.ERROR,
  retry: { retries: 10, initialRetryTime: 100 },
})

function clusterOf(client) {
  // the Kafka object's private cluster factory (a Symbol-keyed property)
  const key = Object.getOwnPropertySymbols(client).find(s => s.toString() === 'Symbol(private:Kafka:createCluster)')
  return client[key]({ allowAutoTopicCreation: false })
}

async function fetchAll(cluster, topic, start, want) {
  // Fetch from each partition's leader from start[p] until want[p] records were read
  const got = {}
  const position = {}
  for (const p of Object.keys(start)) {
    got[p] = []
    position[p] = Number(start[p])
  }
  const deadline = Date.now() + 30000
  while (Object.keys(start).some(p => got[p].length < want[p])) {
    if (Date.now() > deadline) throw new Error('records missing after 30 s')
    await cluster.refreshMetadataIfNecessary()
    const byLeader = cluster.findLeaderForPartitions(topic, Object.keys(start).map(Number))
    for (const [leader, partitions] of Object.entries(byLeader)) {
      const broker = await cluster.findBroker({ nodeId: leader })
      const response = await broker.fetch({
        maxWaitTime: 200,
        minBytes: 1,
        maxBytes: 4 * 1024 * 1024,
        topics: [{ topic, partitions: partitions.map(p => ({ partition: p, fetchOffset: String(position[p]), maxBytes: 1024 * 1024 })) }],
      })
      for (const t of response.responses) {
        for (const part of t.partitions) {
          if (part.errorCode !== 0) throw new Error(`fetch ${topic}-${part.partition}: error ${part.errorCode}`)
          for (const m of part.messages) {
            const offset = Number(m.offset)
            if (offset < position[part.partition]) continue // (a batch starts before the position)
            got[part.partition].push([offset, m.value.toString(), Number(m.timestamp)])
            position[part.partition] = offset + 1
          }
        }
      }
    }
  }
  return got
}

async function main() {
  const { topic, count, partitions, t0, byTime } = args
  const seconds = {}
  let t = Date.now()
  const lap = name => { const now = Date.now(); seconds[name] = (now - t) / 1000; t = now }

  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner })
  await producer.connect()
  const chunk = 1000
  for (let first = 0; first < count; first += chunk) {
    const messages = []
    for (let i = first; i < Math.min(count, first + chunk); i++) {
      messages.push({ partition: i % partitions, value: String(i), timestamp: String(t0 + i) })
    }
    await producer.send({ topic, acks: -1, messages })
  }
  lap('produce')

  const admin = kafka.admin()
  await admin.connect()
  const marks = await admin.fetchTopicOffsets(topic)
  const timed = await admin.fetchTopicOffsetsByTimestamp(topic, byTime)
  const earliest = Object.fromEntries(marks.map(m => [m.partition, Number(m.low)]))
  const latest = Object.fromEntries(marks.map(m => [m.partition, Number(m.high)]))
  const atTime = Object.fromEntries(timed.map(m => [m.partition, Number(m.offset)]))
  lap('list offsets')

  const cluster = clusterOf(kafka)
  await cluster.connect()
  await cluster.addTargetTopic(topic)
  const want = start => Object.fromEntries(Object.keys(start).map(p => [p, latest[p] - start[p]]))
  const fromEarliest = await fetchAll(cluster, topic, earliest, want(earliest))
  lap('consume from earliest')
  const fromTime = await fetchAll(cluster, topic, atTime, want(atTime))
  lap('consume from by-time')

  await cluster.disconnect()
  await admin.disconnect()
  await producer.disconnect()
  process.stdout.write(JSON.stringify({ earliest, latest, atTime, fromEarliest, fromTime, seconds }))
}

main().catch(err => {
  process.stderr.write(`${err.stack || err}\n`)
  process.exit(1)
})
