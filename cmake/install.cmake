# What `cmake --install` puts under the prefix: the C API header, libhetccl,
# the NCCL-ABI drop-ins (lib/hetccl-dropin), the plugins beside libhetccl
# (device kernels, the emulated GPU), the tools, a CMake package
# (find_package(hetccl): the exported target hetccl::hetccl in
# hetcclTargets.cmake) and hetccl.pc for pkg-config. Both package files find
# the prefix from where they lie, so the installed tree can be moved.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS hetccl EXPORT hetcclTargets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY include/hetccl DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS nccl_dropin rccl_dropin LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/hetccl-dropin)
# The emulated GPU's group library and kernels (src/emu) need libhetccl and
# libhetccl-emu, beside them: also when a drop-in, which holds its own copy
# of hetccl's code, loads them.
set_target_properties(hetccl-emu-nccl hetccl-emu-kernels PROPERTIES INSTALL_RPATH "$ORIGIN")
install(TARGETS hetccl-perf hetccl-info RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
set_target_properties(hetccl-perf hetccl-info PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
install(PROGRAMS tools/hetccl-torch-run tools/hetccl-doctor tools/hetccl-trace tools/hetccl-dashboard tools/hetccl-top
        DESTINATION ${CMAKE_INSTALL_BINDIR})
# hetccl-doctor --node's checks: bin/hetccl-doctor looks for them in ../share/hetccl/doctor.
install(DIRECTORY tools/doctor DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/hetccl FILES_MATCHING PATTERN "*.py"
        PATTERN "__pycache__" EXCLUDE)
install(FILES tools/grafana/hetccl.json DESTINATION ${CMAKE_INSTALL_DATADIR}/hetccl/grafana)

set(_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/hetccl)
configure_package_config_file(cmake/hetcclConfig.cmake.in ${CMAKE_BINARY_DIR}/package/hetcclConfig.cmake
                              INSTALL_DESTINATION ${_cmake_dir}
                              PATH_VARS CMAKE_INSTALL_LIBDIR)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/package/hetcclConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)  # 0.x: minor releases may break
install(FILES ${CMAKE_BINARY_DIR}/package/hetcclConfig.cmake ${CMAKE_BINARY_DIR}/package/hetcclConfigVersion.cmake
        DESTINATION ${_cmake_dir})
install(EXPORT hetcclTargets NAMESPACE hetccl:: DESTINATION ${_cmake_dir})

file(RELATIVE_PATH HETCCL_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
configure_file(cmake/hetccl.pc.in ${CMAKE_BINARY_DIR}/package/hetccl.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/package/hetccl.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
