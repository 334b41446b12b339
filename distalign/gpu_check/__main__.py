import sys

from distalign.gpu_check.check import main

sys.exit(main())
