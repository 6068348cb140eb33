"""``kmeta pipeline analyze``: the daemons' state-change logs in (:mod:`.analyze_extract`),
propagation and ISR changes computed (:mod:`.analyze_transform`, :mod:`.analyze_isr`), and the
report with its charts written (:mod:`.analyze_report`, :mod:`.analyze_job`)."""
