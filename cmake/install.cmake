# `cmake --install build --prefix P` lays out:
#   P/bin/{llmc, llmrun, llm-opt}           (llmc and llm-opt when the compiler is built)
#   P/lib/libllmc.so.MAJOR.MINOR.PATCH + its SONAME and dev links, P/lib/libllmc.a
#   P/include/llmc/llmc.h
#   P/lib/cmake/llmc/llmcConfig.cmake (+ llmcConfigVersion.cmake): imported
#     targets llmc::runtime (shared) and llmc::runtime_static
#   P/lib/pkgconfig/llmc.pc
# Every file locates the others relative to itself, so the tree can be moved.
include(CMakePackageConfigHelpers)

set(LLMC_INSTALL_LIBDIR lib)
install(TARGETS llmrun RUNTIME DESTINATION bin)
if(TARGET llmc AND TARGET llm-opt)
  install(TARGETS llmc llm-opt RUNTIME DESTINATION bin)
endif()
install(TARGETS llmc_runtime LIBRARY DESTINATION ${LLMC_INSTALL_LIBDIR} NAMELINK_COMPONENT Development)
install(FILES ${LLMC_STATIC_ARCHIVE} DESTINATION ${LLMC_INSTALL_LIBDIR})
install(FILES ${CMAKE_SOURCE_DIR}/include/llmc/llmc.h DESTINATION include/llmc)

# What a static link needs besides libllmc.a (the runtime's own dependencies).
set(LLMC_STATIC_LINK_LIBRARIES "-lpcre2-8 -lutf8proc -lxxhash -ldl -lpthread -lstdc++ -lm")
configure_file(${CMAKE_SOURCE_DIR}/cmake/llmc.pc.in ${CMAKE_BINARY_DIR}/llmc.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/llmc.pc DESTINATION ${LLMC_INSTALL_LIBDIR}/pkgconfig)

set(LLMC_SHARED_FILE libllmc.so.${PROJECT_VERSION})
set(LLMC_SONAME libllmc.so.${PROJECT_VERSION_MAJOR})
configure_file(${CMAKE_SOURCE_DIR}/cmake/llmcConfig.cmake.in ${CMAKE_BINARY_DIR}/llmcConfig.cmake @ONLY)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/llmcConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/llmcConfig.cmake ${CMAKE_BINARY_DIR}/llmcConfigVersion.cmake
        DESTINATION ${LLMC_INSTALL_LIBDIR}/cmake/llmc)
