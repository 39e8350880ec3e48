"""Framework adapters for AriadneMem: thin layers over ``ariadnemem_core.AriadneMemory``.

Each subpackage imports its framework when it is imported and raises a clear ImportError
naming the extra to install when the framework is missing:

* ``ariadnemem_integrations.langchain``: retriever, tools, agent middleware
  (``pip install "ariadnemem[langchain]"``); ``.legacy`` holds the ``BaseMemory`` shim
  (``pip install "ariadnemem[langchain-classic]"``).
* ``ariadnemem_integrations.llama_index``: retriever and memory block
  (``pip install "ariadnemem[llama-index]"``).

Nothing here re-implements retrieval, serialization or storage: the adapters call
``memory.retrieve/aretrieve``, ``memory.add/aadd`` and read the ``EvidenceGraph``.
"""
