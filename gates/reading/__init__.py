"""gates.reading: the artifacts as the gates read them: validated, sealed against dvc.lock, staleness as `dvc status` decides it, what a run must look like, which golden judges it."""
