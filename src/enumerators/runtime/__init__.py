"""The driver side of ``spark.readStream``: the runtime that drives an enumerator.

One room per job:

- :mod:`~enumerators.runtime.coordinator`: the orchestration Spark calls into
  (restore, notify, latest offset, plan, commit);
- :mod:`~enumerators.runtime.admission`: how much one micro-batch takes;
- :mod:`~enumerators.runtime.available_now`: what "available now" means for a run;
- :mod:`~enumerators.runtime.offsets`: the offset layout Spark logs;
- :mod:`~enumerators.runtime.state_spill`: enumerator state inline or in the state store;
- :mod:`~enumerators.runtime.state_store`: the store for state too large for an offset;
- :mod:`~enumerators.runtime.graceful_stop`: the stop-without-replay protocol;
- :mod:`~enumerators.runtime.discovery`: periodic discovery on a background thread.
"""
