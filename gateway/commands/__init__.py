"""The ``mcp-gateway`` command line: the parser (:mod:`.cli`) and one module per command.

``serve`` (:mod:`.serve`), ``check`` (:mod:`.check`), ``version``, ``demo`` (:mod:`.demo`), ``policy
explain`` (:mod:`.policy_explain`), ``revoke`` (:mod:`.revoke`), ``audit verify``
(:mod:`.audit_command`) and ``catalog pin | diff | approve`` (:mod:`.catalog_command`). A command
never puts the gateway's services together itself: what it runs is built by :mod:`gateway.wiring`,
the one composition root (docs/architecture.md, "Layer rules").
"""
