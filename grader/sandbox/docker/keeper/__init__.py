"""The code that runs inside a pool keeper (pool.py), shipped to it as the package
grader_keeper: server.py (bundles in, frames out), ns.py (one run's namespaces), zygote.py
(pytest forked from a loaded one). Standard library and ctypes only, Python 3.9+."""
