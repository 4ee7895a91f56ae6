"""The OpenAI-compatible HTTP server: protocol models, request handling and streaming, the app, and
the `surgeplan serve` command."""
