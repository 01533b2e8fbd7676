"""Bundled traces and worker-group tables (package data), with their provenance,
citations and licences: README.md and NOTICE beside this file.

``vecsched.adapters.traces`` reads them (``bundled``, ``bundled_trace``).
"""
