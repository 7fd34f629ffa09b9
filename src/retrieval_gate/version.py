"""The plugin's version, in a module of its own so that every layer can name it (fingerprints,
report and baseline headers) without importing the package's public facade."""

__version__ = "0.1.0"
