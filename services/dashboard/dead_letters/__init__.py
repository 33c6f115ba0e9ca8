"""Dead letters for administrators: the wakes that used up their deliveries, and a retry."""
