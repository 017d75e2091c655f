"""xtrain.core: the training stack under test: model, data, optimizer, train loop, launchers, checkpoints."""
