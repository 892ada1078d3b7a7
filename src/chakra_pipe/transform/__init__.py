"""What-if transforms of a rank set: re-target data parallelism, scale compute or communication,
inject stragglers — on any rank set (captured, converted, generated or from another tool).

Each op is a small module with one job; :mod:`.rankset` holds the set in memory while ops run, so
nothing is written until every op has succeeded, and :mod:`.pipeline` chains them, records what each
changed (:mod:`.stats`) and writes the result with provenance. Nothing is imported here, so that
registering the ``transform`` verb (:mod:`.cli`) stays as cheap as the other stages' verbs.
"""
