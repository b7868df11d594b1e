"The methods floor: one module per published method (nbs/04_structrag …); each registers itself with `register_method`, none imports another."
