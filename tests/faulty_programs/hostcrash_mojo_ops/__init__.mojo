# A package with one correct op (add_one), called wrongly by hostcrash_mojo.py and imported from the old path by
# beforecuda_maxtorch.py.
