"""Running pipelines: the scheduler, one stage run, the carry, planning, revisions, inputs,
storage, sink publishing and results."""
