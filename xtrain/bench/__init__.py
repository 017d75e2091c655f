"""xtrain.bench: the benchmarks: training throughput, scaling over worlds, where a step's time goes."""
