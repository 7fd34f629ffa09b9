"""The plugin's own file handling: atomic writes and strict YAML / JSON reading."""
