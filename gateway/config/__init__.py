"""Load and validate ``gateway.yaml`` into one immutable, typed :class:`Config`.

The package, by job:

* :mod:`~gateway.config.model` (with ``issuer_model``, ``backend_model``, ``limits_model``,
  ``state_model``, ``identity_model``, ``policy_external_model``, ``login_model``,
  ``guardrails_model``, ``approvals_model``): the frozen dataclasses (:class:`Config` and one
  per section), whose fields declare the keys of the file once
  (:mod:`~gateway.config.declare`; the JSON Schema is written from them);
* :mod:`~gateway.config.loader`: :func:`load_config` (YAML with positions, the JSON Schema, then
  the sections' semantic checks; every problem reported at once as ``file:line:column``);
* :mod:`~gateway.config.builder`: the state the section builders share (document, directory,
  environment) and the URL checks;
* :mod:`~gateway.config.issuer` (``issuer:`` / ``issuers:``), :mod:`~gateway.config.backend`,
  :mod:`~gateway.config.state`, :mod:`~gateway.config.sections`,
  :mod:`~gateway.config.policy_external`, ...: a ``build_*`` function per section with checks
  of its own (the keys without any are read by :func:`~gateway.config.declare.fill`);
* :mod:`~gateway.config.secrets`: :class:`Secret` and ``{env: NAME}`` / ``{file: PATH}``
  resolution (a ``Secret``'s ``repr`` never shows the value; literal secrets are warnings);
* :mod:`~gateway.config.urls`: :func:`canonical_uri` (RFC 8707) and :func:`is_loopback_url`.

Import the public names from here (``from gateway.config import Config``): this face is the
``__all__`` of each model module, not a list of its own.
"""

from gateway.config import (
    approvals_model,
    backend_model,
    guardrails_model,
    identity_model,
    issuer_model,
    limits_model,
    login_model,
    model,
    policy_external_model,
    state_model,
)
from gateway.config.approvals_model import *  # noqa: F403
from gateway.config.backend_model import *  # noqa: F403
from gateway.config.catalog import CatalogConfig, OnChange
from gateway.config.guardrails_model import *  # noqa: F403
from gateway.config.identity_model import *  # noqa: F403
from gateway.config.issuer_model import *  # noqa: F403
from gateway.config.limits_model import *  # noqa: F403
from gateway.config.loader import load_config
from gateway.config.login_model import *  # noqa: F403
from gateway.config.model import *  # noqa: F403
from gateway.config.policy_external_model import *  # noqa: F403
from gateway.config.secrets import Secret
from gateway.config.state_model import *  # noqa: F403
from gateway.config.urls import canonical_uri, is_loopback_url

__all__ = ["CatalogConfig", "OnChange", "Secret", "canonical_uri", "is_loopback_url", "load_config"]
__all__ += approvals_model.__all__
__all__ += backend_model.__all__
__all__ += guardrails_model.__all__
__all__ += identity_model.__all__
__all__ += issuer_model.__all__
__all__ += limits_model.__all__
__all__ += login_model.__all__
__all__ += model.__all__
__all__ += policy_external_model.__all__
__all__ += state_model.__all__
