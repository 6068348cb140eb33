"""What the controller sends to brokers, and how (Kafka's ControllerChannelManager.scala).

* :mod:`request_batch` -- ControllerRequests (what one event asks of the brokers) and
  ControllerBrokerRequestBatch (LeaderAndIsr, then UpdateMetadata, then StopReplica per broker);
  BatchSender, one batch per send and one update id per event.
* :mod:`update_metadata_batch` -- the UpdateMetadata part of a batch, spliced from each
  topic's entry encoded once (UpdateMetadataBlocks); :mod:`leader_and_isr_blocks` -- the
  LeaderAndIsr entries, likewise.
* :mod:`channel_manager` / :mod:`request_send_thread` -- one queue and one sender task per
  broker, retries, the controller and broker epochs; :mod:`channel_bookkeeping` -- their
  metrics and state-change log lines.
* :mod:`barrier` -- what an admin answer waits for: the brokers' acknowledgements.
* :mod:`faults` -- fault injection (delay, drop, pause the requests to chosen brokers).
"""
