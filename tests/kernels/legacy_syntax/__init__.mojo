# A package written for MAX before 26.7 (seed 000's imports): Mojo 1.x no longer has these modules.
