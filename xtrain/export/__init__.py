"""xtrain.export: the export (Hugging Face folder, model card, GGUF) and the engines that read it back."""
