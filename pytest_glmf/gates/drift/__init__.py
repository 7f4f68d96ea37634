"""The drift gate: teacher-forced log-prob drift against an oracle reference."""
