"""PySpark jobs: plan cluster assignments in (:mod:`.plan`), analyse propagation out
(:mod:`.analyze`); beside them what both share: ``config``, ``session`` (and the driver JVM's
class-data archive, ``jvm_archive``), ``output``.

The only package that imports pyspark. ``config`` and ``plan.plan_reader`` do not, so the CLI (and
``kmeta topics import``) can load flags and finished plans on a machine without a JVM; every
other module is imported lazily by the commands that run Spark.

Each job is extract -> transform -> load: readers return DataFrames, transforms are
DataFrame -> DataFrame functions (tested on their own), and writers only write.
"""
