"""Ways to run chunlian beyond one `chunlian serve` process (Ray Serve: ``chunlian.deploy.ray_serve``)."""
