"""How messages are declared and encoded: the declarative schema that mirrors Kafka's JSON
specs (:mod:`.schema`, :mod:`.field_spec`), the wire types and primitives (:mod:`.types`,
:mod:`.primitives`, :mod:`.length_prefixed`), their compilation to straight-line Python
(:mod:`.compiler`, :mod:`.codegen`), the bulk paths for large arrays (:mod:`.runs`,
:mod:`.stream`, :mod:`.splice`, :mod:`.columnar`), and a records field read as a view of the
frame (:mod:`.record_views`)."""
