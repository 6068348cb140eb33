"""The server side of a connection, from the bytes read to the answers written (Kafka's
``SocketServer`` processors and ``RequestChannel``): :mod:`.server_connection` (one accepted
connection) with what it has read (:mod:`.read_buffer`, :mod:`.memory_pool`,
:mod:`.flow_control`, :mod:`.watchdog`), its requests in order (:mod:`.request_pipeline`,
:mod:`.serve_request`, :mod:`.pending_answers`, :mod:`.memo_path`, :mod:`.raw_tokens`) and its
writes (:mod:`.answer_framing`, :mod:`.answer_writer`, :mod:`.zerocopy`); :mod:`.serving` is
what the connections of one listener share."""
