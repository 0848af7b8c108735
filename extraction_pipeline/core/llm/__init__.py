"""The LLM gateway: every model call goes through litellm (real providers, the loopback fake in
tests, and the built-in offline extractor registered as a litellm custom provider)."""
