"""`python -m awf_nb.frontends.cli …` runs `awf …`."""

from awf_nb.frontends.cli import entry

entry()
