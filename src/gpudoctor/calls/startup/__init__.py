"""The start-up folder `gpudoctor run` puts first on PYTHONPATH: it holds only ``sitecustomize`` (see there)."""
