"""What the controller sends to brokers, and how (Kafka's ControllerChannelManager.scala).

* :mod:`request_batch` -- ControllerRequests (what one event asks of the brokers) and
  ControllerBrokerRequestBatch (LeaderAndIsr, then UpdateMetadata, then StopReplica per broker);
  :mod:`update_metadata_batch` its UpdateMetadata part; :mod:`batch_sender` one batch per send,
  one update id per event.
* :mod:`topic_blocks` / :mod:`leader_and_isr_blocks` -- each topic's UpdateMetadata and
  LeaderAndIsr entries encoded once and spliced into every broker's request.
* :mod:`channel_manager` / :mod:`request_send_thread` -- one queue and one sender task per
  broker, retries, the controller and broker epochs.
* :mod:`barrier` -- what an admin answer waits for: the brokers' acknowledgements.
* :mod:`faults` -- fault injection (delay, drop, pause the requests to chosen brokers).
"""
