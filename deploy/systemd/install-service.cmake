# SPDX-License-Identifier: MIT
# Run by `cmake --install` (install(CODE) in the top-level CMakeLists.txt):
# works out the installed paths from the prefix given at install time
# (--prefix), configures retryd.service with them and installs it, and
# installs the default configuration unless one is already there.
# Set by the caller: RETRYD_SRC (source dir), RETRYD_BIN (build dir),
# RETRYD_REL_BINDIR, RETRYD_REL_SYSCONFDIR, RETRYD_REL_DOCDIR (CMake's
# CMAKE_INSTALL_<dir>) and RETRYD_REL_UNITDIR (RETRYD_SYSTEMD_UNIT_DIR),
# each relative to the prefix or absolute.

function(retryd_full_dir rel kind out)
  if(IS_ABSOLUTE "${rel}")
    set(full "${rel}")
  elseif(kind STREQUAL "SYSCONFDIR" AND CMAKE_INSTALL_PREFIX MATCHES "^/(usr/?)?$")
    # GNUInstallDirs' rule: /usr and / keep their configuration in /etc.
    set(full "/${rel}")
  else()
    set(full "${CMAKE_INSTALL_PREFIX}/${rel}")
  endif()
  string(REGEX REPLACE "//+" "/" full "${full}")
  set(${out} "${full}" PARENT_SCOPE)
endfunction()

retryd_full_dir("${RETRYD_REL_BINDIR}" BINDIR RETRYD_UNIT_BINDIR)
retryd_full_dir("${RETRYD_REL_SYSCONFDIR}" SYSCONFDIR RETRYD_UNIT_SYSCONFDIR)
retryd_full_dir("${RETRYD_REL_DOCDIR}" DOCDIR RETRYD_UNIT_DOCDIR)

retryd_full_dir("${RETRYD_REL_UNITDIR}" UNITDIR unit_dir)

# Installs of one build into several prefixes may run at once (the tests
# do): each configures its own copy.
string(MD5 key "$ENV{DESTDIR}|${CMAKE_INSTALL_PREFIX}")
set(unit "${RETRYD_BIN}/deploy/unit-${key}/retryd.service")
configure_file("${RETRYD_SRC}/deploy/systemd/retryd.service.in" "${unit}" @ONLY)
file(INSTALL "${unit}" DESTINATION "${unit_dir}"
     PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)

# The configuration belongs to the administrator once installed.
set(conf_dir "${RETRYD_UNIT_SYSCONFDIR}/retryd")
if(EXISTS "$ENV{DESTDIR}${conf_dir}/retryd.conf")
  message(STATUS "Keeping: $ENV{DESTDIR}${conf_dir}/retryd.conf "
                 "(the default is in the documentation directory)")
else()
  file(INSTALL "${RETRYD_SRC}/deploy/retryd.conf" DESTINATION "${conf_dir}"
       PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
endif()
