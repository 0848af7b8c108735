"""The LLM gateway: every model call goes through litellm (real providers, the loopback fake in
tests, and the built-in offline extractor registered as a litellm custom provider).

- ``gateway``: one structured call (``complete_extraction``, ``complete_json``), with its budget,
  call gate, repair and usage; ``config``: ``LLMConfig`` and the model's limits;
  ``answer_parsing``: an answer's text validated into the template's model.
- ``providers``: an adapter per provider family, holding what differs (schema subset, cache marks,
  Ollama's window, the batch driver); ``adapter_for`` maps a model string to its adapter.
- ``batch_api``: half-price jobs at a provider's batch API, through the adapter's driver;
  ``batch_model``: the jobs' requests, states and outcomes, shared by the drivers.
- ``classify``: transient or permanent, and the provider's retry delay; ``rate_headers``: the
  account's limits from an answer's headers; ``offline``: the built-in pattern extractor;
  ``litellm_loader``: litellm, imported quietly.
"""
