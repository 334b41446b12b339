import sys

from distalign.tools.gpu_check.check import main

sys.exit(main())
