"""The end-to-end tests' fixtures: ``demo_stack``, the running demo (gateway, development issuer
and demo backend), for every module here."""

from tests.support.demo_stack import demo_stack

__all__ = ["demo_stack"]
