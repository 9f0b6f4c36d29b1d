"""Example data sets bundled with rosetree (see :mod:`rosetree.datasets`)."""
