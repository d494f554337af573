"""`python -m kubenest_binder`: the same as the kubenest-binder command."""

import sys

from kubenest_binder import main

sys.exit(main())
