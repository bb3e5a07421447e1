"""Structured control flow: cond/switch, while_loop/fori_loop, scan/map, associative_scan.

One file per construct, each holding its primitive's whole rule checklist;
``common.py`` holds the jaxpr plumbing they share (tracing a Python function
to a body, permuting a body's inputs and outputs, the type checks).
"""
