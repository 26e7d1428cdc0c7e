# A package whose op computes differently on the GPU than on the CPU (a deliberate bug).
