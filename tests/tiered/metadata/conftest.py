import sys
from pathlib import Path

# Lets the tests import the shared ``metadata_factories`` helper module by name.
sys.path.insert(0, str(Path(__file__).parent))
