"""Results: the shared vocabulary of what a campaign measured, below every stage that produces or
consumes results.

``schema`` (the columns of result rows, their units and better direction), ``metrics`` (a simulation
into those columns), ``collectives`` (the per-collective table), ``busbw`` (nccl-tests bandwidths),
``documents`` (readers of replay, capture and simulator result files) and ``pareto`` (the front of
two lower-better metrics). It imports only ``et`` and the top-level helpers, so ``sweep`` (which
writes shards), ``search``, ``replay`` and ``report`` (which reads them all) each depend on it
instead of on one another, keeping the subpackage import graph acyclic.
"""
