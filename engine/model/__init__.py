"""The Llama-family model over the paged KV cache, its config parser, presets and weight loader.
Empty on purpose: `engine.model.config` and `engine.model.presets` import without torch."""
