"""Who we are: the version, the producer string reports record and the command's name.

In core (not the package ``__init__``) so every layer can read them without importing the
package root, whose lazy ``DecGuard`` export reaches the SDK and the backends."""

__version__ = "0.1.0"

# What reports record in DecGuard's ``decguard_version`` field: the producer and its version.
PRODUCER_VERSION = f"pipeline-{__version__}"

# The command users type; hints in our output name it where DecGuard's name `decguard`.
PROGRAM = "decguard-pipeline"
