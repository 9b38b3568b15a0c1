"""Citations: parse the markers models write and ground them in retrieved passages."""
