"""The Python SDK on the path, as scripts/build-python-module.sh gives it to
componentize-py (-p sdk/python/src)."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "sdk", "python", "src"))
