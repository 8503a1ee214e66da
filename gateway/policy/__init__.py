"""Per-tool scope policy: model, YAML loader with line numbers, pure evaluator, reload.

Pure except for reading policy files. May import only errors, seams, config and yaml_source.
"""
