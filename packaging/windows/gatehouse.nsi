; The Gatehouse installer for Windows (NSIS 3). packaging/build.sh windows
; builds it on Linux with Debian's nsis package:
;
;   makensis -DVERSION=0.1.0 -DWINVERSION=0.1.0.0 -DSTAGE=<folder> \
;            -DICON=<assets/icon.ico> -DOUTFILE=<installer.exe> gatehouse.nsi
;
; STAGE holds gatehouse.exe, gatehouse-app.exe and LICENSE.txt.
;
; It installs for the current user, without administrator rights, into
; %LOCALAPPDATA%\Programs\Gatehouse: the proxy that MCP client configs name
; lives in a folder the user owns, and upgrading needs no elevation. It adds
; a Start menu entry and an entry in Settings > Apps; optionally it starts
; the app at sign-in, adds the folder to the user's PATH, and puts a shortcut
; on the desktop. The uninstaller removes all of that and leaves the user's
; data (%APPDATA%\gatehouse) and the secrets in Credential Manager alone.
;
; /S installs silently with the default choices (an upgrade keeps the
; previous autostart choice); /D=FOLDER, last on the command line, sets the
; folder.

!ifndef VERSION | WINVERSION | STAGE | ICON | OUTFILE
	!error "define VERSION, WINVERSION, STAGE, ICON and OUTFILE (see the top of this file)"
!endif

Unicode true
Target amd64-unicode
ManifestDPIAware true
ManifestSupportedOS Win10
RequestExecutionLevel user
SetCompressor /SOLID lzma

!include MUI2.nsh
!include LogicLib.nsh
!include WinMessages.nsh
!include WordFunc.nsh
!include Sections.nsh

!define APPNAME "Gatehouse"
!define PUBLISHER "The Gatehouse Authors"
!define UNINSTKEY "Software\Microsoft\Windows\CurrentVersion\Uninstall\Gatehouse"
!define RUNKEY "Software\Microsoft\Windows\CurrentVersion\Run"
; The value name install.WindowsRunValue in the Go code expects.
!define RUNVALUE "Gatehouse"

Name "${APPNAME}"
OutFile "${OUTFILE}"
InstallDir "$LOCALAPPDATA\Programs\Gatehouse"
InstallDirRegKey HKCU "${UNINSTKEY}" "InstallLocation"
BrandingText "${APPNAME} ${VERSION}"
ShowInstDetails show
ShowUninstDetails show

VIProductVersion "${WINVERSION}"
VIFileVersion "${WINVERSION}"
VIAddVersionKey "ProductName" "${APPNAME}"
VIAddVersionKey "ProductVersion" "${VERSION}"
VIAddVersionKey "FileVersion" "${VERSION}"
VIAddVersionKey "FileDescription" "${APPNAME} installer"
VIAddVersionKey "CompanyName" "${PUBLISHER}"
VIAddVersionKey "LegalCopyright" "Copyright (c) 2026 ${PUBLISHER}. MIT License."

!define MUI_ICON "${ICON}"
!define MUI_UNICON "${ICON}"
!define MUI_ABORTWARNING
!define MUI_COMPONENTSPAGE_SMALLDESC
!define MUI_FINISHPAGE_RUN "$INSTDIR\gatehouse-app.exe"
!define MUI_FINISHPAGE_RUN_TEXT "Start Gatehouse now"
!define MUI_UNCONFIRMPAGE_TEXT_TOP "Gatehouse will be removed from $INSTDIR. Your servers, policy and evidence log (in %APPDATA%\gatehouse) and the secrets in Credential Manager are kept; delete them yourself if you no longer want them.$\r$\n$\r$\nMCP client configs that start Gatehouse's proxy will stop working: undo them in Gatehouse first, or edit them afterwards."

!insertmacro MUI_PAGE_WELCOME
!insertmacro MUI_PAGE_LICENSE "${STAGE}\LICENSE.txt"
!insertmacro MUI_PAGE_COMPONENTS
!insertmacro MUI_PAGE_DIRECTORY
!insertmacro MUI_PAGE_INSTFILES
!insertmacro MUI_PAGE_FINISH

!insertmacro MUI_UNPAGE_CONFIRM
!insertmacro MUI_UNPAGE_INSTFILES

!insertmacro MUI_LANGUAGE "English"

; ReplaceFile FILE clears the way for a new FILE in $INSTDIR. Windows will
; not overwrite a running program, and MCP clients keep Gatehouse's proxy
; running for as long as they run; but a running program may be renamed. The
; old file is renamed out of the way and deleted by the next install or the
; uninstaller, once nothing runs it.
!macro ReplaceFile FILE
	${If} ${FileExists} "$INSTDIR\${FILE}"
		ClearErrors
		Delete "$INSTDIR\${FILE}"
		${If} ${Errors}
			GetTempFileName $R0 "$INSTDIR"
			Delete "$R0"
			ClearErrors
			Rename "$INSTDIR\${FILE}" "$R0"
			${If} ${Errors}
				Abort "Cannot replace $INSTDIR\${FILE}: quit Gatehouse and the AI agents that use it, then run the installer again."
			${EndIf}
			DetailPrint "${FILE} is running: the old copy is left as $R0 until the next install"
		${EndIf}
	${EndIf}
!macroend

Section "Gatehouse (required)" SecCore
	SectionIn RO
	SetOutPath "$INSTDIR"
	; Old programs renamed by an earlier upgrade, if nothing runs them now.
	Delete "$INSTDIR\ns*.tmp"
	!insertmacro ReplaceFile "gatehouse.exe"
	!insertmacro ReplaceFile "gatehouse-app.exe"
	File "${STAGE}\gatehouse.exe"
	File "${STAGE}\gatehouse-app.exe"
	File "${STAGE}\LICENSE.txt"
	WriteUninstaller "$INSTDIR\uninstall.exe"

	CreateShortcut "$SMPROGRAMS\Gatehouse.lnk" "$INSTDIR\gatehouse-app.exe" "" "$INSTDIR\gatehouse-app.exe" 0 SW_SHOWNORMAL "" "Governed gate in front of your AI agents' MCP servers"

	WriteRegStr HKCU "${UNINSTKEY}" "DisplayName" "${APPNAME}"
	WriteRegStr HKCU "${UNINSTKEY}" "DisplayVersion" "${VERSION}"
	WriteRegStr HKCU "${UNINSTKEY}" "Publisher" "${PUBLISHER}"
	WriteRegStr HKCU "${UNINSTKEY}" "DisplayIcon" "$INSTDIR\gatehouse-app.exe,0"
	WriteRegStr HKCU "${UNINSTKEY}" "InstallLocation" "$INSTDIR"
	WriteRegStr HKCU "${UNINSTKEY}" "UninstallString" '"$INSTDIR\uninstall.exe"'
	WriteRegStr HKCU "${UNINSTKEY}" "QuietUninstallString" '"$INSTDIR\uninstall.exe" /S'
	WriteRegStr HKCU "${UNINSTKEY}" "URLInfoAbout" "https://github.com/gatehouse-dev/gatehouse"
	WriteRegDWORD HKCU "${UNINSTKEY}" "NoModify" 1
	WriteRegDWORD HKCU "${UNINSTKEY}" "NoRepair" 1
	SectionGetSize ${SecCore} $0
	WriteRegDWORD HKCU "${UNINSTKEY}" "EstimatedSize" $0

	; The autostart section below writes the value again when chosen.
	DeleteRegValue HKCU "${RUNKEY}" "${RUNVALUE}"
SectionEnd

Section "Start Gatehouse when I sign in" SecAutostart
	WriteRegStr HKCU "${RUNKEY}" "${RUNVALUE}" '"$INSTDIR\gatehouse-app.exe" --hidden'
SectionEnd

Section "Add gatehouse to my PATH (for terminals)" SecPath
	Call AddToPath
SectionEnd

Section /o "Desktop shortcut" SecDesktop
	CreateShortcut "$DESKTOP\Gatehouse.lnk" "$INSTDIR\gatehouse-app.exe" "" "$INSTDIR\gatehouse-app.exe" 0
SectionEnd

!insertmacro MUI_FUNCTION_DESCRIPTION_BEGIN
	!insertmacro MUI_DESCRIPTION_TEXT ${SecCore} "The tray app, gatehouse-app.exe, and the command line and MCP proxy, gatehouse.exe; a Start menu entry."
	!insertmacro MUI_DESCRIPTION_TEXT ${SecAutostart} "Start Gatehouse in the notification area when you sign in, so that it is there to answer approval requests. You can change this later in Gatehouse."
	!insertmacro MUI_DESCRIPTION_TEXT ${SecPath} "Add the install folder to your user PATH, so that gatehouse.exe runs from any terminal."
	!insertmacro MUI_DESCRIPTION_TEXT ${SecDesktop} "A Gatehouse shortcut on the desktop."
!insertmacro MUI_FUNCTION_DESCRIPTION_END

Function .onInit
	; An upgrade keeps the autostart choice the user made before.
	ReadRegStr $0 HKCU "${UNINSTKEY}" "InstallLocation"
	${If} $0 != ""
		ClearErrors
		ReadRegStr $1 HKCU "${RUNKEY}" "${RUNVALUE}"
		${If} ${Errors}
			!insertmacro UnselectSection ${SecAutostart}
		${EndIf}
	${EndIf}
FunctionEnd

; ReadUserPath sets $0 to the user's PATH as stored (unexpanded), and $1 to
; "ok", or to "long" when NSIS could not hold all of it (its strings have
; NSIS_MAX_STRLEN characters), in which case nothing may be written back.
!macro ReadUserPath UN
Function ${UN}ReadUserPath
	StrCpy $1 "ok"
	ClearErrors
	ReadRegStr $0 HKCU "Environment" "Path"
	${If} ${Errors}
		; Missing, or too long to read: tell them apart by listing the names.
		StrCpy $2 0
		${Do}
			EnumRegValue $3 HKCU "Environment" $2
			${If} $3 == ""
				${Break}
			${EndIf}
			${If} $3 == "Path"
				StrCpy $1 "long"
				${Break}
			${EndIf}
			IntOp $2 $2 + 1
		${Loop}
		StrCpy $0 ""
	${EndIf}
	StrLen $2 $0
	StrLen $3 $INSTDIR
	IntOp $2 $2 + $3
	${If} $2 >= ${NSIS_MAX_STRLEN}
		StrCpy $1 "long"
	${EndIf}
FunctionEnd
!macroend
!insertmacro ReadUserPath ""
!insertmacro ReadUserPath "un."

Function AddToPath
	Call ReadUserPath
	${If} $1 == "long"
		DetailPrint "Your PATH is too long to change safely; add $INSTDIR to it yourself"
		Return
	${EndIf}
	${If} $0 == ""
		StrCpy $2 "$INSTDIR"
	${Else}
		${WordAdd} "$0" ";" "+$INSTDIR" $2
	${EndIf}
	${If} $2 != $0
		WriteRegExpandStr HKCU "Environment" "Path" "$2"
		SendMessage ${HWND_BROADCAST} ${WM_SETTINGCHANGE} 0 "STR:Environment" /TIMEOUT=2000
		DetailPrint "Added $INSTDIR to your PATH"
	${EndIf}
FunctionEnd

Function un.RemoveFromPath
	Call un.ReadUserPath
	${If} $1 == "long"
	${OrIf} $0 == ""
		Return
	${EndIf}
	${un.WordAdd} "$0" ";" "-$INSTDIR" $2
	${If} $2 != $0
		WriteRegExpandStr HKCU "Environment" "Path" "$2"
		SendMessage ${HWND_BROADCAST} ${WM_SETTINGCHANGE} 0 "STR:Environment" /TIMEOUT=2000
	${EndIf}
FunctionEnd

; RemoveProgram FILE deletes a program from $INSTDIR, asking the user to quit
; it while it runs.
!macro RemoveProgram FILE WHAT
	${Do}
		ClearErrors
		Delete "$INSTDIR\${FILE}"
		${IfNot} ${Errors}
			${Break}
		${EndIf}
		MessageBox MB_RETRYCANCEL|MB_ICONEXCLAMATION "${FILE} is running. ${WHAT}, then choose Retry." /SD IDCANCEL IDRETRY +2
		Abort "${FILE} is running: nothing more was removed."
	${Loop}
!macroend

Section "Uninstall"
	!insertmacro RemoveProgram "gatehouse-app.exe" "Quit Gatehouse (its tray icon, Quit)"
	!insertmacro RemoveProgram "gatehouse.exe" "Quit the AI agents that use Gatehouse's proxy (Claude Desktop, Cursor, ...)"
	Delete "$INSTDIR\ns*.tmp"
	Delete "$INSTDIR\LICENSE.txt"
	Delete "$INSTDIR\uninstall.exe"
	; Only if empty: never remove files the user put there.
	RMDir "$INSTDIR"

	Delete "$SMPROGRAMS\Gatehouse.lnk"
	Delete "$DESKTOP\Gatehouse.lnk"
	DeleteRegValue HKCU "${RUNKEY}" "${RUNVALUE}"
	Call un.RemoveFromPath
	DeleteRegKey HKCU "${UNINSTKEY}"
SectionEnd
