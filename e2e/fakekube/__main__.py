# SPDX-License-Identifier: Apache-2.0
"""Entry point for `python3 -m fakekube` (run from e2e/)."""
import sys

from fakekube.server import main

sys.exit(main())
